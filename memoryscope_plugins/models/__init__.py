"""Model protocols and clients. Remote clients import their SDKs lazily (optional extras)."""

from .base import ChatModel, ChatResult, Embedder, Reranker, TokenUsage
from .local_onnx import LocalOnnxEmbedder

__all__ = ["ChatModel", "ChatResult", "Embedder", "Reranker", "TokenUsage", "LocalOnnxEmbedder"]

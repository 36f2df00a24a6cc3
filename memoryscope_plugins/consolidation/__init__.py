"""Consolidation: LLM steps that turn recorded turns into observations and insights (background)."""

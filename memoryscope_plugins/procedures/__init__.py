"""Task memory: procedures an agent learns from its finished runs (docs/procedural.md)."""

"""Framework adapters, imported as `memoryscope_plugins.adapters.<framework>`. Each imports its
framework lazily, so installing one framework never requires the others."""

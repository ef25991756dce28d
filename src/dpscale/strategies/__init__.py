"""Strategy adapters: one module per strategy (see dpscale.registry)."""

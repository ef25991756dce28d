"""Framework code shared by the adapters of one framework (imported in its environment)."""

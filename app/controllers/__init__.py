"""Controllers: one per subject. They call the engine and the services, hold state, and never build widgets."""

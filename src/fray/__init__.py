"""fray: resource requests and the cluster backends that run steps on them (local processes, Ray)."""

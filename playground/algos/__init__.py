"""verl's core algorithms as pure functions behind small registries: `advantages`, `losses`, `kl`, `masked`.

This package imports nothing itself: `names` lists what a config may choose, torch-free.
"""

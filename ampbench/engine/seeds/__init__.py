"""The seed policies, one class per file; `SeedPolicy.kinds()` imports every module here."""

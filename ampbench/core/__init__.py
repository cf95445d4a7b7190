"""Layer: the bottom. What every layer shares: versioned documents, result records, the worker
protocol, units, names, file primitives and the user-error types. Imports nothing of ampbench."""

"""Layer: use-cases, one module per verb (asv's commands/): each composes the layers below."""

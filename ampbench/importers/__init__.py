"""Layer: importers. Other tools' training configs (PaddleOCR, PaddleNLP) translated into suites."""

"""ampbench: does AMP make Paddle training faster and lighter without costing accuracy?"""

__version__ = "0.1.0"

"""A GPU run's report sections and tables."""

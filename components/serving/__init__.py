"""Serving components: deploying a placement plan and taking it down."""

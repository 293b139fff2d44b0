"""Jinja2 prompt templates for the coder and judge agents; rendered by `agents.prompting`."""

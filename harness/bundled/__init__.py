"""Data files shipped inside the wheel.

``harness.bundled.experiments`` is the top-level ``experiments/`` folder and
``harness.bundled.reports`` the top-level ``reports/`` folder, mapped into the
package by ``[tool.setuptools.package-dir]`` in pyproject.toml.  Read them through
``harness.resources``, never by path arithmetic from ``__file__``.
"""

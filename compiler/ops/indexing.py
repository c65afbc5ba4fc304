"""Placeholder until filled in: see the op coverage list in issue 2."""

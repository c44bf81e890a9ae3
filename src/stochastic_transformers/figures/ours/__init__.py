"""Figures of our own results: the two-point reduction of N tokens and feedforward blocks."""

"""Figures of the follow-up (Koubbi, Geshkovski, Rigollet, *Homogenized transformers*):
random keys, queries and values in every layer and head, and their limits."""

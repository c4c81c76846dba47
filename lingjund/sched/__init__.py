"""The scheduling core: snapshot in, plan out (``cycle.py``); pure, no I/O and no clock of its own."""

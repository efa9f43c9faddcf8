"""Presentation: the frame every chapter runs in (`chapter`), formatting of numbers and tables, the
figures (`plotting`, one function each) and the words shared by several chapters (`robustness`)."""

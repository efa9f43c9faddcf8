"""One package per notebook: its computations and the values it glues.  Nothing in the library imports them; a chapter's notebook (and another chapter's, for a shared table) does."""

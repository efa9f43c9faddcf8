"""Chapter 04, the embedded model family's quality and the drafts' agreement with the target."""

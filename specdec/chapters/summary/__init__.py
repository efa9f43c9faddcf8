"""The summary page: the verdict box, the findings and the published results beside ours."""

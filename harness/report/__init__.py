"""Reports for people: figures of runs and the HTML/Markdown report."""

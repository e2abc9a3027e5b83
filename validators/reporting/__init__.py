"""Reports for people: the rich table, the self-contained HTML report and its inline SVG charts."""

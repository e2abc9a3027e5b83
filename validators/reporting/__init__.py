"""Reports for people: the rich table, the self-contained HTML report and its inline SVG charts; the
where-to-change-what table of docs/architecture.md, generated from the registries."""

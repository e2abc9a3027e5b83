"""`validators bisect`: the change of a regressing upgrade that caused the regression."""

"""Pure rules of the story tree, one module per capability: plain functions over values, table-tested."""

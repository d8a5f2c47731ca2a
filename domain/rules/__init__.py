"""Pure rules of the domain, one module per capability: plain functions over values, table-tested."""

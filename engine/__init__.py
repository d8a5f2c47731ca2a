"""Engine mode: the turn loop that lets the main model write a reply through draft tools."""

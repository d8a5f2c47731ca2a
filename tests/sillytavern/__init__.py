"""The chat-completion request bodies SillyTavern 1.12.x sends to a "Custom (OpenAI-compatible)" URL, rebuilt."""

# Our own code, written from a reading of SillyTavern 1.12.6 (tag `1.12.6`, commit 648e70b8c) and checked against
# bodies recorded from a real 1.12.6 (tests/fixtures/sillytavern/, README there). Nothing here is copied from
# SillyTavern (AGPL-3.0); each module notes the facts it relies on, with the files they come from.

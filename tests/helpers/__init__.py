"""Test helpers: fixtures, fakes, a browser client and the scripts tests run in a framework’s
environment (imported as ``helpers.<module>``)."""

"""Tests for the QuickJS-WASI sandbox (`nodmix.sandbox`)."""

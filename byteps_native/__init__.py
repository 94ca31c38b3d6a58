"""byteps-native: BytePS-style push-pull engine with native framework integrations."""
__version__ = "0.1.0"

"""PPO Playground: small PPO agents whose metrics read like verl's, and a diagnosis of what goes wrong."""

__version__ = "0.1.0"

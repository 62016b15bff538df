"""Talking to models: Ollama and OpenAI-compatible providers, the MCP client and servers, the bridge."""

from hub.workers.base import ChatRequest, Generation, Health, Worker

__all__ = ["ChatRequest", "Generation", "Health", "Worker"]

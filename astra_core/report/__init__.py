"""Turning a run into something people can read: tables, JSON, timelines."""

"""Collectors: one package per measurement source (timing and flops are one module each); base.py is the
interface. docs/architecture.md says where a new one goes."""

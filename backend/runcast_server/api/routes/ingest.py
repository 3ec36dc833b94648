"""Placeholder until this route module lands."""

from fastapi import APIRouter

router = APIRouter()

"""Operator UI views: parse input, call one selector per panel or the executor, render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from bloomops.execution import selectors


def dashboard(request: HttpRequest) -> HttpResponse:
    summaries = selectors.queue_summaries()
    return render(request, "web/dashboard.html", {"summaries": summaries})

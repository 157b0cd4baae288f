"""Hit reports of vLLM's "full" report mode, held until an admission confirms them or a later report
supersedes them: the part of kvset.engine_model.replay's request grouping that drops the lookups of
waiting requests (see its module docstring). A mixin of RequestReplay, whose state it reads."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from kvset.engine_model.records import OpenRequest, Report, RequestCounts

_NO_KEYS = np.empty(0, dtype=np.uint64)


class HitReports:
    """Hit reports by their last key; dropped ones kept a while (a second request with that prefix)."""

    counts: RequestCounts
    _batch: int
    _replayed: int
    _reports: OrderedDict[int, Report]
    _dropped: OrderedDict[int, Report]
    _waiting: dict[int, int]

    def _open(
        self, hit_keys: np.ndarray, hit_tokens: np.ndarray, parent: int | None, reported: int
    ) -> OpenRequest:
        raise NotImplementedError

    def _evidence(self, parent: int | None, keys: np.ndarray, request: OpenRequest | None) -> None:
        raise NotImplementedError

    def _report(self, keys: np.ndarray, tokens: np.ndarray) -> None:
        self.counts.reports += 1
        last = int(keys[-1])
        self._evidence(last, _NO_KEYS, None)
        known = self._reports.pop(last, None)
        if known is not None and known.batch == self._batch:
            known.count += 1
            self._reports[last] = known
            return
        if known is not None:
            self._drop(last, known)
        n = len(keys)
        for other_last, other in list(self._reports.items()):
            m = min(n, len(other.keys))
            if (
                other.batch < self._batch
                and len(other.keys) != n
                and int(other.keys[m - 1]) == int(keys[m - 1])
            ):
                del self._reports[other_last]  # the same waiting request, its cached prefix changed
                self.counts.superseded += other.count
                self._drop(other_last, other)
        self._reports[last] = Report(keys, tokens, self._batch, 1)

    def _drop(self, last: int, report: Report) -> None:
        self.counts.not_admitted += report.count
        if report.batch >= self._replayed:  # (read when the replay reaches the next batch)
            self._waiting[report.batch] = self._waiting.get(report.batch, 0) + report.count
        self.counts.not_admitted_blocks += report.count * len(report.keys)
        self._dropped.pop(last, None)
        self._dropped[last] = report

    def _confirm(self, parent: int) -> OpenRequest | None:
        report = self._reports.get(parent)
        if report is not None:
            report.count -= 1
            if report.count == 0:
                del self._reports[parent]
        else:
            report = self._dropped.pop(parent, None)
            if report is None:
                return None
            # two requests with one cached prefix looked up in different steps: not a re-report
            self.counts.not_admitted -= 1
            if report.batch in self._waiting:
                self._waiting[report.batch] -= 1
            self.counts.not_admitted_blocks -= len(report.keys)
            self.counts.recovered += 1
        self.counts.admitted += 1
        return self._open(report.keys, report.tokens, None, report.batch)

    @property
    def pending_reports(self) -> int:
        return sum(r.count for r in self._reports.values())

"""The two export formats' documented schemas (used by tests/report/test_export.py and the
real-model engine test).

- BMF: the JSON Schema published at https://bencher.dev/bmf.json (linked from
  https://bencher.dev/docs/reference/bencher-metric-format/), copied as ``BMF_SCHEMA``.
- github-action-benchmark: README of benchmark-action/github-action-benchmark (commit c38cce9,
  2026-03-31), "Every entry in the JSON file you provide only needs to provide `name`, `unit`,
  and `value`. You can also provide optional `range` (results' variance) and `extra` ...", and
  its src/extract.ts, which parses the file as ``z.array(BenchmarkResult)`` with
  ``BenchmarkResult = z.object({name: z.coerce.string(), value: z.coerce.number(),
  range: z.coerce.string().optional(), unit: z.coerce.string(), extra: z.coerce.string().optional()})``.
  ``GAB_SCHEMA`` states that strictly (no coercion: the types themselves).
"""

BMF_SCHEMA = {
    "$id": "https://bencher.dev/bmf.json",
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}

GAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "value": {"type": "number"}, "range": {"type": "string"},
                       "unit": {"type": "string"}, "extra": {"type": "string"}},
        "required": ["name", "unit", "value"],
    },
}

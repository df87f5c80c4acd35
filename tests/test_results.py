"""fgl_flower.results: durable appends."""

from fgl_flower.results import append_line


def test_append_line_adds_one_line_per_call(tmp_path):
    path = tmp_path / "records.jsonl"
    append_line(path, '{"a": 1}')
    append_line(path, '{"a": 2}')
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'

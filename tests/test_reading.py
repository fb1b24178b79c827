"""offlint.reading: a file's bytes whatever its size says, never more than the limit, and one read where the size
an fstat gave is right."""

from __future__ import annotations

import os

import pytest

from offlint import reading
from offlint.reading import ReadError, read_bytes, read_fd, read_text


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 300_000])
def test_a_file_is_read_whole_in_one_read_when_its_size_is_right(tmp_path, monkeypatch, size):
    path = tmp_path / "f.py"
    data = bytes(i % 251 + 1 for i in range(size))
    path.write_bytes(data)
    reads = []
    real = os.read
    monkeypatch.setattr(reading.os, "read", lambda fd, n: reads.append(n) or real(fd, n))
    assert read_bytes(path) == data
    assert reads == ([size + 1] if size else [reading._CHUNK])  # an empty file: its one read gives nothing


@pytest.mark.parametrize("told", [1, 5, 9, 10, 11, 50])
def test_a_size_that_is_wrong_still_gives_every_byte(tmp_path, told):
    """The file grew or shrank after its fstat (`told` against its 10 bytes): the reads go on to its end."""
    path = tmp_path / "f.py"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_fd(fd, reading.MAX_BYTES, told) == b"0123456789"
    finally:
        os.close(fd)


def test_the_limit_holds_whatever_the_size_says(tmp_path):
    path = tmp_path / "f.py"
    path.write_bytes(b"x" * 101)
    for told in (0, 50, 100, 101, 500):
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(ReadError, match="size limit"):
                read_fd(fd, 100, told)
        finally:
            os.close(fd)
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_fd(fd, 100, 100) == b"x" * 100
    finally:
        os.close(fd)
    path.write_bytes(b"x" * 101)
    with pytest.raises(ReadError, match="size limit"):
        read_bytes(path, 100)


def test_a_pipe_is_read_to_its_end(tmp_path):
    """Standard input (no size): reads until one gives nothing, across writes that come in pieces."""
    r, w = os.pipe()
    os.write(w, b"a" * 1000)
    os.close(w)
    try:
        assert read_fd(r) == b"a" * 1000
    finally:
        os.close(r)


def test_a_text_with_a_byte_order_mark_is_read_without_it(tmp_path):
    path = tmp_path / "f.py"
    path.write_bytes(b"\xef\xbb\xbfx = 1\n")
    assert read_text(path) == "x = 1\n"


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbfx", b"\xef\xbbx", b"caf\xc3\xa9",
                                  b"\xef\xbb\xbfa\xffb", b"ab\xe2\x82", b"\xff", b"\xef\xbb\xbf\xc3"])
def test_decoding_is_utf_8_sig_s(data):
    """One leading BOM dropped, then UTF-8; an invalid byte named at the offset "utf-8-sig" gives."""
    try:
        expected = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        with pytest.raises(ReadError, match=rf"invalid byte at offset {exc.start}\)"):
            reading.decode(data)
    else:
        assert reading.decode(data) == expected

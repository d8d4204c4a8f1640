"""The effective settings are one typed record: every key the recorder writes is declared, and profile.json keeps
what another version wrote as it was written."""

import json
from pathlib import Path

from yolodoctor.record.profile import Profile
from yolodoctor.record.settings import Settings

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "cpu-classify-png-decode" / "profile.json"


def test_every_key_the_recorder_writes_is_declared():
    written = set(json.loads(FIXTURE.read_text())["settings"])
    assert written and written <= set(Settings.__annotations__), written - set(Settings.__annotations__)


def test_a_record_from_another_version_is_read_back_as_written():
    odd = {"workers": 2.0, "imgsz": [640, 480], "device": 5, "a_key_of_the_future": {"x": 1}}
    back = Profile.model_validate_json(Profile(settings=odd).model_dump_json(by_alias=True))
    assert back.settings == odd and Profile().settings == {}


def test_settings_that_are_not_an_object_make_the_record_invalid_not_a_crash():
    import pytest
    from pydantic import ValidationError

    for bad in (5, True, [1, 2], "ram"):
        with pytest.raises(ValidationError, match="settings must be an object"):
            Profile.model_validate({"settings": bad})
    assert Profile.model_validate({"settings": None}).settings == {}
